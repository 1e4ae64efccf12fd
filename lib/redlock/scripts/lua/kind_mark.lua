-- What a semaphore's permits keep in the lock key of their name (the key a
-- Mutex of that name would SET) while any permit is live: a value no client
-- can use (it starts with a NUL byte, as a reservation does), so that one
-- name is never held as a mutex and as a semaphore at once on a node
-- (semaphore_scripts.hpp, rule X). A mutex's SET NX fails on it as on any
-- holder's value, and the acquire script answers -5 (held as a semaphore);
-- a semaphore's acquisition is refused while the key holds anything else.

local semaphore_mark = '\0redsync:semaphore\0'
